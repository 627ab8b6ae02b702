"""The parts of :class:`~agentstate_reducer.MessageReducer`, one module a stage, in pipeline
order: ``lists`` (the lists in and out), ``counts`` (the state, token counts, calibration,
budgets), ``chains`` (the lists it returned, remembered), ``prepare`` (read, edit, plan),
``summaries``, ``handover`` (ledger and hooks), ``effects`` (the effects and their two
drivers), ``flow`` (the one core). Each stage is a class the next one extends; the face is
:mod:`agentstate_reducer.reducer`."""

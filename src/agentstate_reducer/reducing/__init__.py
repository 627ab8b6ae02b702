"""The core of :class:`~agentstate_reducer.MessageReducer`: ``flow`` (the driver,
:func:`~.flow.reduce_flow`, which calls one function a stage in pipeline order),
``prepare`` (repair, the incremental path, read, edit, plan, the turn note),
``summaries``, ``result``, ``handover`` (ledger and hooks), ``replay`` (the reasoning
policy); beside them ``lists`` (the lists in and out), ``counts`` (the state, token
counts, calibration, budgets), ``chains`` (the lists it returned, remembered),
``effects`` (the effects and their two drivers). The reducer's state is a chain of
classes, one a module; the face is :mod:`agentstate_reducer.reducer`."""

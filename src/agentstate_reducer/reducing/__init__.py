"""The core of :class:`~agentstate_reducer.MessageReducer`: ``flow`` (the driver,
:func:`~.flow.reduce_flow`, which calls one function a stage in pipeline order),
``prepare`` (``repair``, the incremental path in ``append``, or read, edit, plan, the
turn note), ``summaries``, ``result``, ``handover`` (ledger and hooks), ``replay`` (the
reasoning policy); beside them ``lists`` (the lists in and out), ``counts`` (the state,
token counts, calibration, budgets), ``chains`` (a returned list, remembered, and how a
later list is compared with it), ``memory`` (the returned lists remembered and matched),
``effects`` (the effects; ``_drivers`` runs them). The reducer's state is a chain of
classes, one a module; the face is :mod:`agentstate_reducer.reducer`."""

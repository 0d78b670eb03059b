"""Pure rules and values: no I/O, no storage, no clock."""

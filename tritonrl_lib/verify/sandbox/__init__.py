"""The sandbox: a candidate's process forked (or taken from the spares), held to its limits (time,
memory, processes, bytes, GPU share), its messages read over the wire, and its whole tree killed."""

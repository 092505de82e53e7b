"""What runs inside a candidate's process: the reference phase (inputs drawn, reference outputs sent),
then the guard, then the candidate imported and run stage by stage, with the runtime checks, the
input sets and their variations, timing, and the encoding of tensors for the wire."""

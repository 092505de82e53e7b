"""The error of an evaluation that cannot run as asked."""


class EvalError(RuntimeError):
    """An evaluation that cannot run as asked; the message says what to do."""

"""Domain errors: the CLI turns each into one line and exit code 1."""


class LivebytesError(ValueError):
    """A user-facing problem with the request (bad shape, unknown model, refused configuration)."""


class UnknownModelError(LivebytesError):
    pass


class RefusedShapeError(LivebytesError):
    """The implementation itself refuses this shape or configuration (its reason is the message)."""


class UsageProblem(LivebytesError):
    """A request the caller cannot express (the command line: exit 2, like click's own; Python: a bad argument)."""

"""The one exception type for bad user input."""


class UserError(Exception):
    """Bad input from the user (config, file, tensor): reported as one line naming what is at fault."""

"""Logging (`chop.tools.logger`)."""

import logging

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}


def get_logger(name="mase_rs"):
    """The package's logger (or a child of it)."""
    return logging.getLogger(name)


def set_logging_verbosity(level="info"):
    """Sets the verbosity of mase_rs's logger: `debug`, `info`, `warning`, `error` or `critical`.

    >>> set_logging_verbosity("debug")
    """
    key = str(level).lower()
    if key not in _LEVELS:
        raise ValueError(f"set_logging_verbosity: unknown level `{level}`; levels: {', '.join(_LEVELS)}")
    get_logger().setLevel(_LEVELS[key])

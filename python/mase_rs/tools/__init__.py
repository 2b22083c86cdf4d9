"""Tools (`chop.tools`): input generation, logging, checkpoint loading."""

from mase_rs.tools.checkpoint_load import load_model
from mase_rs.tools.get_input import InputGenerator
from mase_rs.tools.logger import get_logger, set_logging_verbosity

__all__ = ["InputGenerator", "get_logger", "load_model", "set_logging_verbosity"]

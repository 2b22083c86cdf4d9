"""Where the examples find the jsc data: `MASE_DATA_DIR` when set, else `data/jsc` of the
repository when the full data set was downloaded there, else the small jsc file the repository
ships for its tests (`crates/io/tests/fixtures/jsc`)."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def use_jsc_data():
    """Points `MASE_DATA_DIR` at a folder holding `jsc/` and returns that folder."""
    if os.environ.get("MASE_DATA_DIR"):
        return Path(os.environ["MASE_DATA_DIR"])
    if (REPO / "data" / "jsc").is_dir():
        folder = REPO / "data"
    else:
        folder = REPO / "crates" / "io" / "tests" / "fixtures"
    os.environ["MASE_DATA_DIR"] = str(folder)
    return folder

"""`ch` as an entry point of the Python package: the same Rust `main` as the `ch` binary."""

import sys

from mase_rs import _native


def main(argv=None):
    """Runs `ch` with `argv` (default: the command line) and exits with its status."""
    args = sys.argv[1:] if argv is None else list(argv)
    sys.exit(_native.ch_main(["ch", *args]))


if __name__ == "__main__":
    main()

"""The IR (`chop.ir`)."""

"""`InputGenerator` (`chop.tools.get_input`): batches of a data module as model inputs."""


class InputGenerator:
    """Iterates over a data module's batches as input dicts: `next(iter(gen))` is
    `{"x": batch}`. Passes that need samples (`profile_statistics_analysis_pass`) take it as
    `input_generator` and read the same data set and split in Rust.

    >>> from mase_rs.dataset import MaseDataModule
    >>> dm = MaseDataModule(name="jsc", batch_size=4)
    >>> tuple(next(iter(InputGenerator(dm, task="cls")))["x"].shape)
    (4, 16)
    """

    def __init__(self, data_module, model_info=None, task="cls", which_dataloader="train", max_batches=None, **_nlp_options):
        if which_dataloader not in ("train", "val", "test"):
            raise ValueError(f"InputGenerator: which_dataloader must be train, val or test, not `{which_dataloader}`")
        self.data_module, self.model_info, self.task = data_module, model_info, task
        self.which_dataloader, self.max_batches = which_dataloader, max_batches

    def __iter__(self):
        loader = getattr(self.data_module, f"{self.which_dataloader}_dataloader")()
        for i, (xs, _ys) in enumerate(loader):
            if self.max_batches is not None and i >= self.max_batches:
                return
            yield {"x": xs}

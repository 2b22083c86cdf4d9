//! The table of named models.

use crate::context::ModelContext;
use crate::layers::check_graph;
use crate::{jsc, mobilenet, resnet, text, toy, vision, vit, Result, ZooError};
use mase_ir::Graph;

/// What the zoo says about a named model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// The name `ch` takes (`jsc-tiny`).
    pub name: &'static str,
    /// One line on the architecture and its size on its usual data set.
    pub description: &'static str,
    /// `physical` (tabular jet data), `vision` (images), `sequence` (token sequences) or `toy`.
    pub family: &'static str,
    /// The data set the model is made for (the one its description's parameter count is on).
    pub dataset: &'static str,
}

/// A model builder: the model's name (for error messages) and the data set's context.
type Builder = fn(&str, &ModelContext) -> Result<Graph>;

struct Entry {
    info: ModelInfo,
    build: Builder,
}

const fn entry(name: &'static str, family: &'static str, dataset: &'static str, description: &'static str, build: Builder) -> Entry {
    Entry { info: ModelInfo { name, description, family, dataset }, build }
}

/// Every named model, in the order `ch` lists them.
const MODELS: &[Entry] = &[
    entry("jsc-tiny", "physical", "jsc", "BN, ReLU, Linear(16, 5), ReLU (117 params on jsc)", jsc::jsc_tiny),
    entry("jsc-toy", "physical", "jsc", "BN, then 3 x (Linear, BN, ReLU) with widths 8, 8, 5 (327 params on jsc)", jsc::jsc_toy),
    entry("jsc-s", "physical", "jsc", "BN, 16-64-32-32-32-5 MLP with BN on the first and last layers (5615 params on jsc)", jsc::jsc_s),
    entry(
        "jsc-three-linear",
        "physical",
        "jsc",
        "lab 4's BN, ReLU, 3 x (Linear, ReLU) with widths 16, 16, 5 (661 params on jsc)",
        jsc::jsc_three_linear,
    ),
    entry(
        "jsc-three-layer",
        "physical",
        "jsc",
        "hls4ml's jet tagger 16-64-32-32-5 with ReLU, logits out (4389 params on jsc)",
        jsc::jsc_three_layer,
    ),
    entry(
        "toy",
        "toy",
        "toy_tiny",
        "ToyNet: flatten, Linear(in, 8), ReLU, Linear(8, 8), ReLU, Linear(8, classes) (130 params on toy_tiny)",
        toy::toy,
    ),
    entry("toy_tiny", "toy", "toy_tiny", "ToyTiny: flatten, Linear(in, 2), ReLU; 2 outputs (10 params on toy_tiny)", toy::toy_tiny),
    entry("mlp", "vision", "digits", "Flatten, Linear(in, 64), ReLU, Linear(64, classes) (4810 params on digits)", vision::mlp),
    entry(
        "tfc",
        "vision",
        "mnist",
        "FINN's TFC: Flatten, 3 x (Linear(64), BN, ReLU), Linear(64, classes) (59594 params on mnist)",
        vision::tfc,
    ),
    entry(
        "mnist-cnn",
        "vision",
        "mnist",
        "2 x (Conv3x3, ReLU, MaxPool2) with 8 and 16 channels, Flatten, Linear (9098 params on mnist)",
        vision::mnist_cnn,
    ),
    entry(
        "vgg7",
        "vision",
        "cifar10",
        "MASE's CIFAR VGG7: 6 conv+BN+ReLU, 3 max-pools, 8192-1024-1024-classes (14029450 params on cifar10)",
        vision::vgg7,
    ),
    // torchvision's classifiers, with torchvision's state-dict names.
    entry(
        "resnet18",
        "vision",
        "cifar10",
        "torchvision's resnet18 with the CIFAR stem (conv1 3x3 stride 1, no max pool) (11173962 params on cifar10)",
        resnet::resnet18,
    ),
    entry(
        "mobilenet_v2",
        "vision",
        "cifar10",
        "torchvision's mobilenet_v2 (width 1.0); stem stride 1 on images of at most 32x32, 2 above (2236682 params on cifar10)",
        mobilenet::mobilenet_v2,
    ),
    entry(
        "vit-tiny",
        "vision",
        "cifar10",
        "torchvision's VisionTransformer, hidden 192, 6 layers, 3 heads, MLP 768; patch 4 (32x32) or 7 (28x28) (2693578 params on cifar10)",
        vit::vit_tiny,
    ),
    // Sequence models.
    entry(
        "bert-tiny",
        "sequence",
        "digits-seq",
        "BERT encoder classifier: hidden 128, 2 layers, 2 heads, FFN 512, GELU, token ids 0..16 (425226 params on digits-seq)",
        text::bert_tiny,
    ),
];

fn lookup(name: &str) -> Option<&'static Entry> {
    let lower = name.to_ascii_lowercase();
    MODELS.iter().find(|e| e.info.name == lower)
}

/// The names of all named models.
pub fn model_names() -> Vec<&'static str> {
    MODELS.iter().map(|e| e.info.name).collect()
}

/// Name, family and description of a named model (case-insensitive), or `None` if unknown.
pub fn model_info(name: &str) -> Option<ModelInfo> {
    lookup(name).map(|e| e.info)
}

/// Builds the graph of a named model for a data set. The graph has no parameters; its
/// `param_specs` say what to initialise. Fails for an unknown name (listing the known ones) or
/// a data set the model does not fit.
pub fn build_model(name: &str, ctx: &ModelContext) -> Result<Graph> {
    let e = lookup(name).ok_or_else(|| ZooError::UnknownModel { name: name.to_string(), known: model_names().join(", ") })?;
    let g = (e.build)(e.info.name, ctx)?;
    check_graph(e.info.name, &g, ctx)?;
    Ok(g)
}

/// Number of trainable scalars the graph's modules own (what PyTorch reports as "Trainable
/// params"); BatchNorm running statistics are buffers and do not count.
pub fn trainable_params(graph: &Graph) -> usize {
    graph.param_specs().iter().filter(|(_, s)| s.trainable).map(|(_, s)| s.shape.iter().product::<usize>()).sum()
}

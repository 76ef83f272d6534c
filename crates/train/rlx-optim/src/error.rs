//! `OptimError`: what the optimizers, state dicts and the trainer report.

use thiserror::Error;

/// Errors of `rlx-optim`.
#[derive(Debug, Error)]
pub enum OptimError {
    /// `param` and `grad` lengths disagree with `shape`.
    #[error("param {name:?}: shape {shape:?} has {want} elements but param has {param} and grad has {grad}")]
    Length {
        /// The param's name.
        name: String,
        /// The shape passed to `step`.
        shape: Vec<usize>,
        /// Elements the shape holds.
        want: usize,
        /// Param length.
        param: usize,
        /// Grad length.
        grad: usize,
    },
    /// A param's shape changed between steps (its state was built for another shape).
    #[error("param {name:?}: state was built for shape {was:?}, now stepped with {now:?}")]
    ShapeChanged {
        /// The param's name.
        name: String,
        /// The shape its state has.
        was: Vec<usize>,
        /// The shape given now.
        now: Vec<usize>,
    },
    /// A state dict that does not fit this optimizer.
    #[error("state dict: {0}")]
    StateDict(String),
    /// Reading or writing a state dict / checkpoint file.
    #[error(transparent)]
    Safetensors(#[from] rlx_safetensors::SafetensorsError),
    /// Building, differentiating or compiling the training graph.
    #[error("autodiff: {0}")]
    Autodiff(#[from] rlx_autodiff::AdError),
    /// Compiling or running the training graph.
    #[error(transparent)]
    Runtime(#[from] rlx_runtime::Error),
    /// The trainer was given something inconsistent (names, batch sizes).
    #[error("trainer: {0}")]
    Trainer(String),
    /// A built-in data set is unknown or its bundled file is corrupt. The text says so itself
    /// ("unknown data set …", "data set line 3: …"): no `trainer: ` prefix, since loading a data
    /// set is not the trainer's doing.
    #[error("{0}")]
    Dataset(String),
}

/// `Result` with [`OptimError`].
pub type Result<T, E = OptimError> = std::result::Result<T, E>;

//! `OnnxError`: every way reading or importing an ONNX model can fail.

use thiserror::Error;

/// Errors from parsing, importing or running an ONNX model. Messages name the node (ONNX
/// node name, or `#index` when unnamed) and the op type.
#[derive(Debug, Error)]
pub enum OnnxError {
    /// The file could not be read.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bytes are not a valid `ModelProto` (truncated, corrupted, not ONNX).
    #[error("malformed ONNX protobuf (a truncated or corrupt file): {0}")]
    Decode(#[from] prost::DecodeError),
    /// The model is structurally invalid (missing graph, dangling value name, bad tensor size).
    #[error("invalid model: {0}")]
    Invalid(String),
    /// No importer for this op type in the domain (or at this opset).
    #[error("unsupported op {domain}{op_type} (node {node})")]
    UnsupportedOp {
        /// `op_type`.
        op_type: String,
        /// Domain prefix (`""` for the default domain, else `"domain::"`).
        domain: String,
        /// Node name.
        node: String,
    },
    /// A tensor element type RLX does not represent (STRING, FLOAT8, INT4, UINT16, ...).
    #[error("unsupported ONNX data type {name} ({code}) in {what}")]
    UnsupportedDtype {
        /// `TensorProto.DataType` name.
        name: String,
        /// Its enum value.
        code: i32,
        /// Where it appears.
        what: String,
    },
    /// A graph input was given dims (a fed value or `ImportOptions::input_shapes`) that
    /// contradict its declared static dims (different rank, or a static dim that differs).
    #[error("input {name:?}: given shape {given:?} contradicts the model's declared shape [{declared}]")]
    InputShape {
        /// The graph input.
        name: String,
        /// The declared dims (`?`/`dim_param` for dynamic ones).
        declared: String,
        /// The dims given.
        given: Vec<usize>,
    },
    /// A node's attributes or operands are not supported or are invalid.
    #[error("{op_type} (node {node}): {msg}")]
    Node {
        /// `op_type`.
        op_type: String,
        /// Node name.
        node: String,
        /// What is wrong.
        msg: String,
    },
    /// Building the RLX graph failed (an op's shape rule rejected the operands).
    #[error("building the RLX graph: {0}")]
    Ir(#[from] rlx_ir::IrError),
    /// Compiling or running the imported graph failed.
    #[error("running: {0}")]
    Runtime(#[from] rlx_runtime::Error),
}

impl OnnxError {
    /// Coarse category used by the conformance report (`unsupported op`, `unsupported dtype`,
    /// `import error`, `runtime error`).
    pub fn category(&self) -> &'static str {
        match self {
            OnnxError::UnsupportedOp { .. } => "unsupported op",
            OnnxError::UnsupportedDtype { .. } => "unsupported dtype",
            OnnxError::Runtime(_) => "runtime error",
            _ => "import error",
        }
    }
}

/// Shorthand result type.
pub type Result<T, E = OnnxError> = std::result::Result<T, E>;

//! Composites: builder functions that emit primitives wrapped in a named region
//! ([`crate::ops::Composite`]) with attributes. Names follow ONNX / PyTorch.

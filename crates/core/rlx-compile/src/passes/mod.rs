//! The passes, one module each, each with one entry point
//! `pub fn run(&mut Graph, &PassOptions) -> Result<PassStats, CompileError>`.

pub mod attention;
pub mod const_fold;
pub mod cse;
pub mod dce;
pub mod epilogue;
pub mod fuse;
pub mod inline;
pub mod legalize;
pub mod simplify;
pub mod upcast;
pub mod verify;

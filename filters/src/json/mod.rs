//! JSON read where it lies, for every wire format (OpenAI, Anthropic, MCP): [`raw`] reads
//! members and their parts in place as `&RawValue` slices of the body, and `splice` writes a
//! body from those slices with chosen members replaced, byte for byte otherwise.

pub mod raw;
pub(crate) mod splice;

//! Chat templates: a model's Jinja `tokenizer.chat_template` rendered with `minijinja`, with the
//! Python-compatible string/dict methods (`.strip()`, `.items()`, ...) that Hugging Face
//! templates use, and `raise_exception`, as `transformers`' `apply_chat_template` provides.

use minijinja::{Environment, Error, ErrorKind, context};
use serde::{Deserialize, Serialize};

use crate::TextError;

/// One chat turn: `role` is `system`, `user`, `assistant` (or whatever the template knows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Speaker role.
    pub role: String,
    /// Message text.
    pub content: String,
}

impl ChatMessage {
    /// A message with `role` and `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: role.into(), content: content.into() }
    }
}

/// Render `template` for `messages`, as `transformers`' `apply_chat_template(messages,
/// add_generation_prompt=..., tokenize=False)` does: the template sees `messages`,
/// `add_generation_prompt`, `bos_token` and `eos_token`; `raise_exception(msg)` aborts.
///
/// Errors: [`TextError::Template`] when the template does not parse, fails while rendering, or
/// calls `raise_exception`.
pub fn apply_chat_template(
    template: &str,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    bos: &str,
    eos: &str,
) -> Result<String, TextError> {
    let mut env = Environment::new();
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    // HF renders with trim_blocks and lstrip_blocks.
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    let tmpl = env.template_from_str(template).map_err(|e| TextError::Template(format!("{e:#}")))?;
    tmpl.render(context! {
        messages => messages,
        add_generation_prompt => add_generation_prompt,
        bos_token => bos,
        eos_token => eos,
    })
    .map_err(|e| TextError::Template(format!("{e:#}")))
}

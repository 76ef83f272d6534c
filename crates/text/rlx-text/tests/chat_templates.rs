//! Chat templates rendered by minijinja vs Python jinja2 goldens
//! (tools/refgen/gen_chat_templates.py -> tests/fixtures/chat_templates.json).

use rlx_text::{ChatMessage, TextError, apply_chat_template};
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/chat_templates.json")).expect("fixture")
}

#[test]
fn templates_match_jinja2() {
    let fx = fixture();
    let mut n = 0;
    for case in fx["cases"].as_array().unwrap() {
        let name = case["template"].as_str().unwrap();
        let t = &fx["templates"][name];
        let msgs: Vec<ChatMessage> =
            serde_json::from_value(fx["conversations"][case["conversation"].as_str().unwrap()].clone()).unwrap();
        let agp = case["add_generation_prompt"].as_bool().unwrap();
        let got = apply_chat_template(
            t["source"].as_str().unwrap(),
            &msgs,
            agp,
            t["bos"].as_str().unwrap(),
            t["eos"].as_str().unwrap(),
        );
        let what = format!("{name} / {} / add_generation_prompt={agp}", case["conversation"]);
        match case["expected"].as_str() {
            Some(want) => assert_eq!(got.expect(&what), want, "{what}"),
            None => {
                let err = got.expect_err(&what);
                let TextError::Template(msg) = &err else { panic!("{what}: {err:?}") };
                assert!(msg.contains(case["error"].as_str().unwrap()), "{what}: {msg}");
            }
        }
        n += 1;
    }
    assert!(n >= 30);
}

#[test]
fn invalid_template_is_a_typed_error() {
    let err = apply_chat_template("{% for m in messages %}{{ m.content }", &[], true, "", "").unwrap_err();
    assert!(matches!(err, TextError::Template(_)), "{err:?}");
}

#[test]
fn smollm2_gguf_template_is_the_fixture_template() {
    let Some(path) = rlx_fetched::or_skip(rlx_fetched::SMOLLM2_GGUF, "smollm2_gguf_template_is_the_fixture_template")
    else {
        return;
    };
    let file = rlx_gguf::GgufFile::open(&path).unwrap();
    let tok = rlx_text::Tokenizer::from_gguf(&file).unwrap();
    assert_eq!(tok.chat_template(), fixture()["templates"]["SmolLM2-135M-Instruct"]["source"].as_str());
}

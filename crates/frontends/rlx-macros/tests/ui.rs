//! Compile-time errors of `rlx!` (trybuild): each names the problem and points at its span.
//! Regenerate the expected `.stderr` files with `TRYBUILD=overwrite cargo test -p rlx-macros --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

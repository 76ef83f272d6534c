use rlx_macros::rlx;

fn main() {
    let _g = rlx! {
        input x: [?, -1];
        out x;
    };
}

use rlx_macros::rlx;

fn main() {
    let _g = rlx! {
        input x: [?, 4];
        let y = relu(x);
    };
}

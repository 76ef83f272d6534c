use rlx_macros::rlx;

fn main() {
    let _g = rlx! {
        input x: [?, 4];
        param w: [4, 2];
        let y = x @ v;
        out y;
    };
}

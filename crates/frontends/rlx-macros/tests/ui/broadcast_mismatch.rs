use rlx_macros::rlx;

fn main() {
    let _g = rlx! {
        input x: [?, 256];
        param b: [10];
        let y = x + b;
        out y;
    };
}

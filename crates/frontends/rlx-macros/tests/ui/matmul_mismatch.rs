use rlx_macros::rlx;

fn main() {
    let _g = rlx! {
        graph "mlp";
        input x: [?, 784];
        param w1: [784, 256];
        param w2: [128, 10];
        let h = gelu(x @ w1);
        let y = h @ w2;
        out y;
    };
}

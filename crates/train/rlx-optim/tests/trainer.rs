//! `Trainer` on real data: softmax regression on the embedded UCI digits learns (loss falls,
//! accuracy well above chance), and resuming from saved params + optimizer state after 2
//! epochs gives the weights of 4 straight epochs bit for bit.

use rlx_ir::{DType, Graph, Shape};
use rlx_optim::data::{self, Dataset, epoch_order};
use rlx_optim::{Adam, Optim, Optimizer, StateDict, Trainer, TrainerOptions};

const B: usize = 64;

fn model(ds: &Dataset) -> Graph {
    let mut g = Graph::new("softmax_regression");
    let x = g.input("x", Shape::new(&[B, 64], DType::F32));
    let y = g.input("y", Shape::new(&[B], DType::I32));
    let w = g.param("w", Shape::new(&[ds.classes, 64], DType::F32));
    let b = g.param("b", Shape::new(&[ds.classes], DType::F32));
    let logits = g.linear(x, w, Some(b));
    let loss = g.cross_entropy(logits, y);
    g.set_outputs(vec![loss]);
    g
}

fn epochs(tr: &mut Trainer<Optim>, ds: &Dataset, range: std::ops::Range<u64>) -> Vec<f32> {
    let mut losses = vec![];
    for e in range {
        let mut sum = 0.0;
        let order = epoch_order(ds.train.len(), 7, e);
        for batch in order.chunks_exact(B) {
            let x = tr.input_mut::<f32>("x").unwrap();
            for (k, &i) in batch.iter().enumerate() {
                x[k * 64..(k + 1) * 64].copy_from_slice(&ds.train.x[i * 64..(i + 1) * 64]);
            }
            let y = tr.input_mut::<i32>("y").unwrap();
            for (k, &i) in batch.iter().enumerate() {
                y[k] = ds.train.y[i];
            }
            sum += tr.step().unwrap();
        }
        losses.push(sum / (ds.train.len() / B) as f32);
    }
    losses
}

fn trainer(ds: &Dataset) -> Trainer<Optim> {
    let opts = TrainerOptions { clip_grad_norm: Some(5.0), ..Default::default() };
    Trainer::new(&model(ds), Adam::new(0.02), opts).unwrap()
}

#[test]
fn trains_and_resumes_bit_exactly() {
    let ds = data::digits().unwrap();
    assert_eq!((ds.train.len(), ds.test.len()), (1438, 359));
    let mut straight = trainer(&ds);
    let losses = epochs(&mut straight, &ds, 0..4);
    assert!(losses.windows(2).all(|w| w[1] < w[0]) && losses[3] < 0.5, "losses {losses:?}");

    // Accuracy of the trained weights on the test split, computed on the host.
    let (w, b) = (straight.param("w").unwrap(), straight.param("b").unwrap());
    let hits = (0..ds.test.len())
        .filter(|&i| {
            let x = &ds.test.x[i * 64..(i + 1) * 64];
            let score = |c: usize| b[c] + (0..64).map(|k| w[c * 64 + k] * x[k]).sum::<f32>();
            (0..10).max_by(|&p, &q| score(p).total_cmp(&score(q))).unwrap() as i32 == ds.test.y[i]
        })
        .count();
    assert!(hits as f64 / ds.test.len() as f64 > 0.85, "accuracy {hits}/{}", ds.test.len());

    // 2 epochs, save params + optimizer state, fresh trainer, load, 2 more.
    let dir = tempfile::tempdir().unwrap();
    let mut first = trainer(&ds);
    epochs(&mut first, &ds, 0..2);
    let saved: Vec<(String, Vec<f32>)> =
        first.params().iter().map(|(n, _)| (n.clone(), first.param(n).unwrap().to_vec())).collect();
    first.optimizer().state_dict().save(dir.path().join("opt.safetensors")).unwrap();
    drop(first);
    let mut second = trainer(&ds);
    for (n, v) in &saved {
        second.set_param(n, v).unwrap();
    }
    second.optimizer_mut().load_state_dict(&StateDict::load(dir.path().join("opt.safetensors")).unwrap()).unwrap();
    epochs(&mut second, &ds, 2..4);
    for (n, _) in straight.params() {
        let bits = |t: &Trainer<Optim>| t.param(n).unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&second), bits(&straight), "param {n} after resume");
    }
}

#[test]
fn trainer_reports_bad_names() {
    let ds = data::digits().unwrap();
    let mut tr = trainer(&ds);
    assert!(tr.input_mut::<f32>("nope").is_err());
    assert!(tr.input_mut::<f32>("y").is_err(), "y is i32");
    assert!(tr.set_param("w", &[0.0; 3]).is_err());
}

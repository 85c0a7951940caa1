use super::*;

/// The chain `ips` of a user-mode sample resolved by a fresh run.
fn resolve(ips: &[u64]) -> (bool, Vec<(u32, u64)>) {
    let sym = Symbolizer::new(Default::default());
    let mut run = Run::new(&sym, HashMap::new(), false);
    let mut out = Vec::new();
    let kept = run.resolve_ips(
        CpuMode::User,
        ips.len(),
        &|i| ips.get(i).copied(),
        1,
        None,
        &mut out,
    );
    (kept, out)
}

#[test]
fn a_chain_with_an_unknown_context_entry_is_discarded_whole() {
    // A frame-pointer walk that read -1 as a return address: perf 6.1
    // takes it for a corrupted chain and prints no frame at all.
    let user = [PERF_CONTEXT_USER, 0x40_1000, 0x40_1100, u64::MAX];
    assert_eq!(resolve(&user), (false, vec![]));
    let kernel = [
        PERF_CONTEXT_KERNEL,
        0xffff_ffff_8100_0000,
        PERF_CONTEXT_USER,
        0x40_1000,
    ];
    let guest = [PERF_CONTEXT_USER, 0x40_1000, -2048i64 as u64, 0x40_1100];
    assert_eq!(resolve(&guest), (false, vec![]));
    // The known markers only switch modes.
    let (kept, out) = resolve(&kernel);
    assert!(kept);
    assert_eq!(
        out,
        vec![(NO_DSO, 0xffff_ffff_8100_0000), (NO_DSO, 0x40_1000)]
    );
}

#[test]
fn a_shard_truncated_while_it_is_replayed_is_the_runs_error_not_a_crash() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/result_dir_demo/profiles/perf/worker_0/q01/perf.data.part000");
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("perf.data.part000");
    std::fs::copy(&demo, &shard).unwrap();
    let sym = Symbolizer::new(super::super::Options::default());
    let ran = sym.run(&shard, None, |_| Ok(()));
    assert!(ran.is_ok_and(|o| o.samples > 0), "intact, it is read");
    std::fs::copy(&demo, &shard).unwrap();
    let ran =
        crate::sys::input::tests::truncated_after_map(&shard, || sym.run(&shard, None, |_| Ok(())));
    match ran {
        Err(Error::ShrankUnderMap { path }) => assert_eq!(path, shard),
        other => panic!("not the shrink: {other:?}"),
    }
}

#[test]
fn kernel_addresses_move_by_the_kaslr_offset_modules_do_not() {
    let core = Some((
        0xffff_ffff_a100_0000,
        0xffff_ffff_a200_0000,
        0xffff_ffff_a100_0000,
    ));
    let here = Some(0xffff_ffff_8100_0000);
    assert_eq!(
        kernel_address(0xffff_ffff_a13a_e453, core, here),
        0xffff_ffff_813a_e453
    );
    assert_eq!(
        kernel_address(0xffff_ffff_c000_0010, core, here),
        0xffff_ffff_c000_0010
    );
    assert_eq!(
        kernel_address(0xffff_ffff_a13a_e453, core, None),
        0xffff_ffff_a13a_e453
    );
    assert_eq!(
        kernel_address(0xffff_ffff_a13a_e453, None, here),
        0xffff_ffff_a13a_e453
    );
}

//! The binary's allocator: jemalloc, with the options compiled into it
//! (`main.rs`), on Linux with glibc.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_binary_allocates_with_jemalloc_which_returns_freed_pages_from_a_background_thread() {
    // jemalloc prints its version, build and options at exit when asked
    // to; glibc's allocator ignores the variable and prints nothing. The
    // options' lines end in ` (` and the value each arena took; jemalloc's
    // defaults are no background thread and a 10,000 ms decay.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_market-data-server"))
        .arg("--version")
        .env("MALLOC_CONF", "stats_print:true")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{out:?}");
    let stats = String::from_utf8_lossy(&out.stderr);
    for option in [
        "opt.background_thread: true (",
        "opt.dirty_decay_ms: 1000 (",
    ] {
        assert!(
            stats.contains(option),
            "jemalloc's statistics lack `{option}`:\n{stats}"
        );
    }
}

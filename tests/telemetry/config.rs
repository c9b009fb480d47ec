use std::process::Command;

use tollgate_testkit::*;

#[test]
fn check_config_refuses_bad_telemetry_values_by_key_path() {
    let dir = temp_dir();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[telemetry]\notlp_endpoint = \"collector:4318\"\nsample_ratio = 1.5\nservice_name = \" \"\nqueue_spans = 0\nbatch_spans = 10\nexport_interval_ms = 0\nexport_timeout_ms = 9999999\n[telemetry.headers]\n\"bad header\" = \"x\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["check-config", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for path in [
        "telemetry.otlp_endpoint",
        "telemetry.sample_ratio",
        "telemetry.service_name",
        "telemetry.queue_spans",
        "telemetry.batch_spans",
        "telemetry.export_interval_ms",
        "telemetry.export_timeout_ms",
        "telemetry.headers.bad header",
    ] {
        assert!(err.contains(path), "{path} not in {err}");
    }
    let good = dir.join("good.toml");
    std::fs::write(
        &good,
        "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"\nsample_ratio = 0.1\n[telemetry.headers]\nauthorization = \"Bearer abc\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["check-config", "--config"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let unknown = dir.join("unknown.toml");
    std::fs::write(&unknown, "[telemetry]\nsample_rate = 0.5\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["check-config", "--config"])
        .arg(&unknown)
        .output()
        .unwrap();
    assert!(!out.status.success(), "an unknown key is refused");
}

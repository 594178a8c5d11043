from simrec_studies import bench_opt_adg


def test_benchmark_runs_without_lightfm(capsys):
    code = bench_opt_adg.main(["--presets", "tiny", "--budgets", "0.5", "1", "--dim", "4",
                               "--lrs", "0.1", "--samplings", "user", "positive",
                               "--lightfm-python", "/nonexistent/python"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "LightFM not found" in printed
    assert "sampling=user" in printed and "sampling=positive" in printed

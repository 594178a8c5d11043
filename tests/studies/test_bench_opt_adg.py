import math

from simrec_studies import bench_opt_adg


def test_benchmark_runs_without_lightfm(capsys):
    code = bench_opt_adg.main(["--presets", "tiny", "--budgets", "0.25", "0.5", "--dim", "4",
                               "--lrs", "0.05", "0.1", "--l2s", "0.2", "--samplings", "user", "positive",
                               "--lightfm-python", "/nonexistent/python"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "LightFM not found" in printed
    assert "sampling=user" in printed and "sampling=positive" in printed


def test_coordinate_search_searches_rates_at_the_middle_regulariser_then_regularisers():
    surface = {(r, g): -abs(r - 0.1) - abs(g - 1.0) for r in (0.01, 0.1, 1.0) for g in (0.5, 1.0, 2.0)}
    calls = []

    def value(rate, reg):
        calls.append((rate, reg))
        return surface[rate, reg]
    searched = bench_opt_adg.coordinate_search(value, [0.01, 0.1, 1.0], [2.0, 0.5, 1.0])
    assert calls == [(0.01, 1.0), (0.1, 1.0), (1.0, 1.0), (0.1, 2.0), (0.1, 0.5)]
    assert [(r, g) for r, g, _ in searched] == calls
    assert max(searched, key=lambda p: p[2])[:2] == (0.1, 1.0)


def test_coordinate_search_steps_past_a_grid_edge_while_the_best_value_sits_on_it():
    """Rates peak at 0.001 and regularisers at 10, both past their grids: the rate stage steps
    down by the grid's ratio (10) twice and stops there; the regulariser stage steps up once
    past 2 (ratio 2, to 4) and again (8), each step improving, until the edge steps run out."""
    calls = []

    def value(rate, reg):
        calls.append((rate, reg))
        return -abs(math.log10(rate) + 3) - abs(math.log2(reg) - math.log2(10))
    searched = bench_opt_adg.coordinate_search(value, [0.1, 1.0], [0.5, 1.0, 2.0], edge_steps=2)
    assert [round(r, 6) for r, _ in calls[:4]] == [0.1, 1.0, 0.01, 0.001]
    assert [round(g, 6) for _, g in calls[4:]] == [0.5, 2.0, 4.0, 8.0]
    assert all(round(r, 6) == 0.001 for r, _ in calls[4:])
    assert [(r, g) for r, g, _ in searched] == calls
    none = bench_opt_adg.coordinate_search(value, [0.1, 1.0], [0.5, 1.0, 2.0], edge_steps=0)
    assert len(none) == 4

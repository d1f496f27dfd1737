import pytest

from plif.train import TrainConfig
from plif.train.summary import LINE_WIDTH, epoch_line


def _row(epoch, taus, val=True, acc=1.0, seconds=12345.6):
    row = {"epoch": epoch, "train_loss": 0.1234, "train_acc": acc, "test_acc": acc, "lr": 9.5e-4,
           "epoch_time_s": seconds, "samples_per_s": 123456.0, "taus": taus}
    return {**row, "val_acc": acc} if val else row


@pytest.mark.parametrize("taus", [[1.62, 1.7, 2.1, 3.3, 2.2, 2.0, 1.9, 1.8], [1.95, 1.93, 1.92, 1.9], [2.0], [],
                                  [1e30, 1.5]])
def test_the_epoch_line_fits_a_100_column_terminal(taus):
    """The paper's protocol at its longest (1024 epochs, validation, 100 % accuracies, hours per
    epoch); the line was ~120 characters and wrapped (issue 32)."""
    line = epoch_line(_row(1024, taus), TrainConfig(epochs=1024))
    assert len(line) <= LINE_WIDTH and line.startswith("epoch 1024/1024 loss 0.1234 train 100.00% test 100.00% val")
    assert "lr 9.5e-04 3.4h" in line


def test_every_tau_is_listed_where_the_line_has_room_and_their_range_where_not():
    short = epoch_line(_row(1, [1.95, 1.93, 1.92, 1.9], val=False, acc=0.8512, seconds=78.3), TrainConfig(epochs=2))
    assert short == "epoch 1/2 loss 0.1234 train 85.12% test 85.12% lr 9.5e-04 1.3m tau 1.95 1.93 1.92 1.90"
    long = epoch_line(_row(3, [1.62, 1.7, 2.1, 3.3, 2.2, 2.0, 1.9, 1.8]), TrainConfig(epochs=1024))
    assert long.endswith("tau 1.62-3.30")

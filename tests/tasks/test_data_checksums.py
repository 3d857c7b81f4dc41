"""A data file that is missing or altered is refused with one line naming the file,
the expected and the actual sha256."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from tasks.data_files import DEFAULT_DATA_DIR, GPQA_ZIP, GSM8K_TEST, GSM8K_TRAIN, read_verified
from tasks.errors import TaskDataError
from tasks.gpqa_data import load_gpqa
from tasks.gsm8k_data import load_gsm8k_test
from tasks.selfcheck import run_self_check

README_HASHES = {  # tasks/data/README.md, restated independently of tasks.data_files
    "gsm8k/test.jsonl": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
    "gsm8k/train.jsonl": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
    "gpqa/dataset.zip": "461ae7329f15a3e35f8184d2dac24b990f34fdf12f366ca4062d8e6638cd08dc",
}


def _copy_data(tmp_path):
    target = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR, target)
    return target


def test_shipped_files_hash_as_documented():
    for data_file in (GSM8K_TEST, GSM8K_TRAIN, GPQA_ZIP):
        payload = (DEFAULT_DATA_DIR / data_file.relpath).read_bytes()
        assert hashlib.sha256(payload).hexdigest() == README_HASHES[data_file.relpath]
        assert data_file.sha256 == README_HASHES[data_file.relpath]
        assert read_verified(data_file) == payload


def test_corrupted_gsm8k_file_is_one_line_error(tmp_path):
    data_dir = _copy_data(tmp_path)
    path = data_dir / "gsm8k" / "test.jsonl"
    payload = bytearray(path.read_bytes())
    payload[1000] ^= 0x01  # one flipped bit
    path.write_bytes(bytes(payload))
    actual = hashlib.sha256(bytes(payload)).hexdigest()
    with pytest.raises(TaskDataError) as info:
        load_gsm8k_test(data_dir)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    assert README_HASHES["gsm8k/test.jsonl"] in message
    assert actual in message
    assert isinstance(info.value, OSError)


def test_corrupted_gpqa_zip_is_refused_before_decryption(tmp_path):
    data_dir = _copy_data(tmp_path)
    path = data_dir / "gpqa" / "dataset.zip"
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(TaskDataError) as info:
        load_gpqa("diamond", data_dir)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert README_HASHES["gpqa/dataset.zip"] in message
    assert hashlib.sha256(path.read_bytes()).hexdigest() in message


def test_missing_file_is_one_line_error(tmp_path):
    data_dir = _copy_data(tmp_path)
    (data_dir / "gsm8k" / "train.jsonl").unlink()
    with pytest.raises(TaskDataError) as info:
        read_verified(GSM8K_TRAIN, data_dir)
    message = str(info.value)
    assert "\n" not in message
    assert str(data_dir / "gsm8k" / "train.jsonl") in message
    assert README_HASHES["gsm8k/train.jsonl"] in message
    assert "missing" in message


def test_self_check_reports_a_corrupted_file_and_fails(tmp_path):
    data_dir = _copy_data(tmp_path)
    path = data_dir / "gsm8k" / "train.jsonl"
    path.write_bytes(path.read_bytes().replace(b"Natalia", b"Natalie", 1))
    report = run_self_check(data_dir=data_dir, task_names=["gsm8k", "gsm8k_cot"])
    assert not report.passed
    failed = {(r.check, r.subject) for r in report.results if not r.passed}
    assert failed == {("checksum", "gsm8k/train.jsonl"), ("load", "gsm8k")}

# Shared pytest options for the oracle tests: the mixq CLI, a scratch directory, and the directory
# of the small test tools (tests/tools/*.cpp).
import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--mixq", action="store", default=os.environ.get("MIXQ_CLI", "mixq"),
                     help="path to the mixq command-line tool")
    parser.addoption("--workdir", action="store", default=None, help="scratch directory")
    parser.addoption("--mixq-tools-dir", action="store",
                     default=os.environ.get("MIXQ_TOOLS_DIR"),
                     help="directory of the test tools built from tests/tools/")


@pytest.fixture
def mixq_cli(request):
    return request.config.getoption("--mixq")


@pytest.fixture
def workdir(request, tmp_path):
    d = request.config.getoption("--workdir")
    if not d:
        return tmp_path
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture
def mixq_tools_dir(request):
    return request.config.getoption("--mixq-tools-dir")

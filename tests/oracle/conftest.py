# Options shared by the oracle tests: the mixq CLI, a scratch directory, and the directory of the
# small test tools built from tests/tools/*.cpp.
import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--mixq", action="store", default=os.environ.get("MIXQ_CLI"),
                     help="path to the mixq command-line tool")
    parser.addoption("--workdir", action="store", default=None, help="scratch directory")
    parser.addoption("--mixq-tools-dir", action="store", default=os.environ.get("MIXQ_TOOLS_DIR"),
                     help="directory of the test tools built from tests/tools/")


@pytest.fixture(scope="session")
def mixq_cli(request):
    path = request.config.getoption("--mixq")
    if not path:
        pytest.skip("--mixq not given")
    return path


@pytest.fixture
def workdir(request, tmp_path):
    base = request.config.getoption("--workdir")
    if not base:
        return tmp_path
    d = os.path.join(base, request.node.name)
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture
def mixq_tools_dir(request):
    return request.config.getoption("--mixq-tools-dir")

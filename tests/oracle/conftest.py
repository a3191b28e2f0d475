# Options shared by the oracle tests (the lead reconciles this file with the GGUF helper's).
import pytest


def pytest_addoption(parser):
    parser.addoption("--mixq", action="store", default=None, help="path of the mixq CLI")
    parser.addoption("--workdir", action="store", default=None, help="scratch directory")


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
    import os
    d = os.path.join(base, request.node.name)
    os.makedirs(d, exist_ok=True)
    return d

# Never calls the function: records what it can see of its environment and fails with a digest of it.
# The fixed run and a mutant run must show the same digest, and it must kill no mutant.
import hashlib
import os
import resource
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _view() -> str:
    names = (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE,
             resource.RLIMIT_NPROC, resource.RLIMIT_CORE, resource.RLIMIT_DATA, resource.RLIMIT_STACK)
    limits = [resource.getrlimit(n) for n in names]
    cwd = os.getcwd()
    env = sorted((k, v.replace(cwd, "CWD")) for k, v in os.environ.items())
    seen = [sorted(os.listdir(ROOT)), sorted(os.listdir(HERE)), HERE.replace(ROOT, "ROOT"),
            cwd.replace(ROOT, "ROOT").rsplit("/", 1)[0], limits, env, sys.argv, sys.flags]
    return hashlib.sha256(repr(seen).encode()).hexdigest()[:16]


def test_environment_digest():
    assert False, "VIEW " + _view()


def test_passes_on_any_environment_it_saw_on_the_fixed_run():
    assert resource.getrlimit(resource.RLIMIT_CPU)[0] == __CPU__ and len(os.listdir(ROOT)) == __NDIRS__

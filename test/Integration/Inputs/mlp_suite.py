"""The end-to-end MLP suite: one template, one lit test per case.

Every case of CASES runs the RUN lines of mlp/mlp.template with its own
%{gen} (the arguments of `fsdp_mlir.dev.gen mlp`) on 1, 2, 4 and 8 ranks; lit
lists each as Integration/mlp/<case>-w<ranks>.test.
"""

import os

import lit.formats
import lit.Test
import lit.TestRunner

# name: (what it covers, fsdp_mlir.dev.gen arguments, mesh shape per rank count)
CASES = {
    "ceil": (
        "Shard(0), uneven widths, ceil policy",
        "--widths 16,10,7,4 --placement dim0 --policy ceil",
        {1: "1", 2: "2", 4: "4", 8: "8"},
    ),
    "balanced": (
        "Shard(0), uneven widths, balanced policy",
        "--widths 16,10,7,4 --placement dim0 --policy balanced",
        {1: "1", 2: "2", 4: "4", 8: "8"},
    ),
    "dim1": (
        "Shard(1), uneven widths",
        "--widths 16,10,7,4 --placement dim1",
        {1: "1", 2: "2", 4: "4", 8: "8"},
    ),
    "even": (
        "Shard(0), widths divisible by the shard count",
        "--widths 16,32,8 --placement dim0",
        {1: "1", 2: "2", 4: "4", 8: "8"},
    ),
    "hsdp": (
        "HSDP: replicate x shard mesh",
        "--widths 16,10,7,4 --placement dim0",
        {1: "1x1", 2: "2x1", 4: "2x2", 8: "2x4"},
    ),
    "strided": (
        "StridedShard",
        "--widths 16,32,16 --placement strided",
        {1: "1", 2: "2", 4: "4", 8: "8"},
    ),
}


class CaseTest(lit.Test.Test):
    """A test whose script is the shared template."""

    def __init__(self, suite, path_in_suite, config, template, substitutions):
        super().__init__(suite, path_in_suite, config)
        self.template = template
        self.substitutions = substitutions

    def getSourcePath(self):
        return self.template


class MlpSuite(lit.formats.ShTest):
    def getTestsInDirectory(self, testSuite, path_in_suite, litConfig, localConfig):
        template = os.path.join(testSuite.getSourcePath(path_in_suite), "mlp.template")
        for name, (_what, gen, meshes) in CASES.items():
            for ranks, mesh in meshes.items():
                subst = [("%{gen}", f"{gen} --batch 2 --mesh {mesh}")]
                test_name = f"{name}-w{ranks}.test"
                yield CaseTest(
                    testSuite,
                    path_in_suite + (test_name,),
                    localConfig,
                    template,
                    subst,
                )

    def execute(self, test, litConfig):
        return lit.TestRunner.executeShTest(
            test,
            litConfig,
            self.execute_external,
            extra_substitutions=test.substitutions,
        )

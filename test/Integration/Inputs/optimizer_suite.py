"""One optimizer step per layout of the integration suite: one template,
one lit test per case.

Every case of CASES runs optimizer/optimizer.template: the generated MLP in
that layout, compiled with every variant of optim_check.VARIANTS (SGD and
AdamW, with and without clipping, weight decay, momentum, Nesterov) and
checked against torch.optim and the numpy model. lit lists each case as
Integration/optimizer/<case>.test.
"""

import os

import lit.formats
import lit.TestRunner
from mlp_suite import CASES as MLP_CASES
from mlp_suite import CaseTest
from optim_check import VARIANTS

# name: (fsdp_mlir.dev.gen arguments, extra --fsdp-pipeline options)
CASES = {
    "ceil-w4": (MLP_CASES["ceil"][1] + " --mesh 4", ""),
    "balanced-w8": (MLP_CASES["balanced"][1] + " --mesh 8", "compute=loops"),
    "dim1-w4": (MLP_CASES["dim1"][1] + " --mesh 4", "bucket=none schedule=false"),
    "even-w2": (MLP_CASES["even"][1] + " --mesh 2", ""),
    "hsdp-2x2": (MLP_CASES["hsdp"][1] + " --mesh 2x2", "compute=loops"),
    "hsdp-2x4": (MLP_CASES["hsdp"][1] + " --mesh 2x4", ""),
    "strided-w4": (MLP_CASES["strided"][1] + " --mesh 4", ""),
    "replicate-w2": ("--widths 16,10,7,4 --placement replicate --mesh 2", ""),
}


class OptimizerSuite(lit.formats.ShTest):
    def getTestsInDirectory(self, testSuite, path_in_suite, litConfig, localConfig):
        template = os.path.join(testSuite.getSourcePath(path_in_suite), "optimizer.template")
        for name, (gen, pipeline) in CASES.items():
            subst = [("%{gen}", f"{gen} --batch 2"), ("%{pipeline}", pipeline)]
            for variant, (cfg, _, _) in VARIANTS.items():
                subst.append((f"%{{{variant}}}", cfg.pipeline_options() + " keep-grads=true"))
            yield CaseTest(
                testSuite, path_in_suite + (f"{name}.test",), localConfig, template, subst
            )

    def execute(self, test, litConfig):
        return lit.TestRunner.executeShTest(
            test,
            litConfig,
            self.execute_external,
            extra_substitutions=test.substitutions,
        )

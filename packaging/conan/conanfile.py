"""Conan 2 recipe for specdec, a header-only C++20 library of speculative-decoding algorithms.

The recipe lives in packaging/conan/ of the specdec repository and packages the checkout it sits in:
    conan create packaging/conan --build=missing -s compiler.cppstd=20
Options mirror the CMake targets: simd (xsimd), cuda (CUDA toolkit from the system), learn (Eigen),
stats (Boost.Math, header-only). See packaging/README.md.
"""
import os
import re

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain
from conan.tools.files import copy, load, rmdir

required_conan_version = ">=2.0"

# The repository root, relative to this recipe.
_ROOT = os.path.join("..", "..")


class SpecdecConan(ConanFile):
    name = "specdec"
    description = "Header-only C++20 library of speculative-decoding algorithms"
    license = "Apache-2.0"
    topics = ("speculative-decoding", "llm", "inference", "sampling", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {
        "simd": [True, False],
        "cuda": [True, False],
        "learn": [True, False],
        "stats": [True, False],
    }
    default_options = {
        "simd": True,
        "cuda": False,
        "learn": False,
        "stats": False,
    }
    no_copy_source = True

    # -- version: read from include/specdec/version.hpp, the single source of truth ----------------
    def set_version(self):
        if self.version:
            return
        header = load(self, os.path.join(self.recipe_folder, _ROOT, "include", "specdec", "version.hpp"))
        parts = []
        for part in ("MAJOR", "MINOR", "PATCH"):
            match = re.search(rf"#define\s+SPECDEC_VERSION_{part}\s+(\d+)", header)
            if not match:
                raise ConanInvalidConfiguration(f"specdec: no SPECDEC_VERSION_{part} in version.hpp")
            parts.append(match.group(1))
        self.version = ".".join(parts)

    def export_sources(self):
        root = os.path.join(self.recipe_folder, _ROOT)
        for pattern in ("include/*", "cmake/*", "CMakeLists.txt", "LICENSE"):
            copy(self, pattern, src=root, dst=self.export_sources_folder)

    def configure(self):
        if self.options.stats:
            self.options["boost"].header_only = True

    def layout(self):
        # Local flows (conan install/build packaging/conan) see the repository root as the source.
        self.folders.root = _ROOT
        self.folders.source = "."
        self.folders.build = "build-conan"
        self.folders.generators = os.path.join(self.folders.build, "generators")

    def requirements(self):
        # Versions the library is developed and tested with (Debian 12: xsimd 8.1, Eigen 3.4,
        # Boost 1.74+).
        if self.options.simd:
            self.requires("xsimd/8.1.0")
        if self.options.learn:
            self.requires("eigen/3.4.0")
        if self.options.stats:
            self.requires("boost/[>=1.74 <2]")

    def package_id(self):
        # Header-only: the compiler, arch and build type do not change the package, but the options
        # do (they select the CMake targets and the dependencies).
        self.info.settings.clear()

    def validate(self):
        check_min_cppstd(self, 20)
        if self.options.cuda and self.settings.os not in ("Linux", "Windows"):
            raise ConanInvalidConfiguration("specdec: the cuda option needs Linux or Windows")

    def generate(self):
        tc = CMakeToolchain(self)
        tc.cache_variables["SPECDEC_ENABLE_SIMD"] = bool(self.options.simd)
        tc.cache_variables["SPECDEC_ENABLE_CUDA"] = "ON" if self.options.cuda else "OFF"
        tc.cache_variables["SPECDEC_ENABLE_EIGEN"] = bool(self.options.learn)
        tc.cache_variables["SPECDEC_ENABLE_BOOST_MATH"] = bool(self.options.stats)
        tc.cache_variables["SPECDEC_BUILD_TESTS"] = False
        tc.cache_variables["SPECDEC_BUILD_BENCH"] = False
        tc.cache_variables["SPECDEC_BUILD_EXAMPLES"] = False
        tc.cache_variables["SPECDEC_INSTALL"] = True
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        # Header-only: configuring checks the options and dependencies; nothing is compiled.
        cmake = CMake(self)
        cmake.configure()

    def package(self):
        copy(self, "LICENSE", src=self.source_folder, dst=os.path.join(self.package_folder, "licenses"))
        cmake = CMake(self)
        cmake.install()
        # Consumers get config files from Conan's generators (CMakeDeps, PkgConfigDeps) instead.
        rmdir(self, os.path.join(self.package_folder, "share"))

    def package_info(self):
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        self.cpp_info.set_property("cmake_file_name", "specdec")
        # With components, the package-level target aggregates all of them; the core is its own
        # component so that specdec::specdec stays "core only", as with the CMake install.
        self.cpp_info.set_property("cmake_target_name", "specdec::all")
        self.cpp_info.set_property("pkg_config_name", "specdec-all")

        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "specdec::specdec")
        core.set_property("pkg_config_name", "specdec")
        core.includedirs = ["include"]
        core.bindirs = []
        core.libdirs = []

        def component(name, requires, defines=()):
            comp = self.cpp_info.components[name]
            comp.set_property("cmake_target_name", f"specdec::{name}")
            comp.set_property("pkg_config_name", f"specdec-{name}")
            comp.requires = ["core", *requires]
            comp.defines = list(defines)
            comp.includedirs = []
            comp.bindirs = []
            comp.libdirs = []

        if self.options.simd:
            component("simd", ["xsimd::xsimd"], ["SPECDEC_ENABLE_SIMD=1"])
        if self.options.cuda:
            # The CUDA toolkit is not a Conan package: link CUDA::cudart (find_package(CUDAToolkit))
            # next to specdec::cuda.
            component("cuda", [], ["SPECDEC_ENABLE_CUDA=1"])
        if self.options.learn:
            component("learn", ["eigen::eigen"])
        if self.options.stats:
            component("stats", ["boost::headers"])
            component("conformance", ["stats"])  # the conformance kit rides on stats

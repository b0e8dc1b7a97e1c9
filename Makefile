# `make demo` runs the main job; `make test` runs every test. Both install
# what is missing and build first.
.PHONY: all setup build test demo clean
all: build
setup build:
	@scripts/setup.sh
test: build
	@scripts/run-tests.sh
demo: build
	@scripts/demo.sh
clean:
	rm -rf build

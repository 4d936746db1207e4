# The README's two commands: `make lab` and `make test`. Each does its own set-up.
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help lab lab-down test lint unit molecule plan bench-planner

help:
	@echo "make lab       bring up the local lab and deploy the fleet on it (site.yml)"
	@echo "make lab-down  remove everything the lab created"
	@echo "make test      lint, unit tests, argument_specs parity, molecule scenarios"

lab:
	bin/lab up

lab-down:
	bin/lab down

test:
	bin/test

lint:
	bin/test lint specs

unit:
	bin/test unit

molecule:
	bin/test molecule

"""The offline suite's helpers: servers in SGLang's shapes, driver stand-ins, the bad-input catalogue, the
house rules and the other modules the tests in checks/offline import (`from checkhelpers import ...`).
Installed editable from checks/offline/pyproject.toml; the modules find the repository from their own
files, so they run from the checkout they live in."""

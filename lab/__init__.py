"""The lab: measurements and campaigns beside the product (README.md here). Nothing in the product or in
checks/ imports it."""

"""One adapter module per verl class whose private members we touch.

Each module wraps the private verl symbols the plugin needs behind one small public function and checks them first;
its test in ``tests/agentrl_recipe/training/verl_adapters/`` fails naming the verl symbol when verl changes it.
"""

"""The ledger capability: programs, accounts and postings.

Use cases: create and read programs (``programs.ProgramService``); open
accounts, read balances and history (``accounts.AccountService``); credit,
debit, adjust, transfer and post balanced transactions exactly once, read them
by id, order or owner (``transactions.TransactionService``); check invariants
1, 3 and 5, and those of the capabilities it is given (``check.CheckService``:
the wallet's 2 and the notifications' 6 through ``Ledger``). Every write goes
through the posting engine (``postings.PostingEngine``); ``refusals`` keeps a
refused request's answer for its transaction id.
"""

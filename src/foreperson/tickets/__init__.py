"""The ticket job (seed 000's nightly job): read tickets, classify, draft, triage."""

from .job import JobProgress, JobReport, Outbox, TicketJob, run_job, ticket_tasks
from .model import TicketModel, bundled_examples, load_examples
from .reader import Ticket, TicketFile, read_tickets

__all__ = ["JobProgress", "JobReport", "Outbox", "Ticket", "TicketFile", "TicketJob",
           "TicketModel", "bundled_examples", "load_examples", "read_tickets", "run_job",
           "ticket_tasks"]

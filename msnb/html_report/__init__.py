"""The one-file HTML report (``msnb report``, ``%mfmon_report``, ``msnb.report``): verdict, figures, config, lineage, problems, versions."""

from .build import ReportResult, report

__all__ = ["report", "ReportResult"]
